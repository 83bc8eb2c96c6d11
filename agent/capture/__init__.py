"""A user's own kernel (``swizzleperf optimize --app CMD --kernel NAME``): the launch captured from
the user's command through Triton's hooks (``capture``, ``capture_hook``: the hook's source becomes
the app's ``sitecustomize``), the program-id -> tile mapping lifted into a rewrite target
(``lift``, ``lift_common``, ``lift_eval``, ``lift_refuse``) or the program ids remapped
(``pid_remap``), and the generated kernel module, its patch and write-back (``user_kernel``).
An app written for CUDA runs on a CPU as it is (``cuda_on_cpu``, beside the hook in the app's
process); the generated module leaves a one-file operator's own test out (``app_code``); a
construct the installed Triton lacks is named in one line (``interpreter_gaps``).
Without ``--kernel`` the app runs once under a kernel trace and the hottest kernel whose tile
order can matter is chosen (``bottleneck``; ``swizzleperf profile --app CMD`` lists them).

Imports agent.verification and the layers below it; never agent.distributed (its sibling),
the proposers, the loop or the CLI.
"""
