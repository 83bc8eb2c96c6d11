"""A user's own kernel (``swizzleperf optimize --app CMD --kernel NAME``): the launch captured from
the user's command through Triton's hooks (``capture``, ``capture_hook``: the hook's source becomes
the app's ``sitecustomize``), the program-id -> tile mapping lifted into a rewrite target
(``lift``, ``lift_common``, ``lift_eval``, ``lift_refuse``) or the program ids remapped
(``pid_remap``), and the generated kernel module, its patch and write-back (``user_kernel``).

Imports agent.verification and the layers below it; never agent.distributed (its sibling),
the proposers, the loop or the CLI.
"""
