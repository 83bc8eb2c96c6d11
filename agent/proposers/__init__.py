"""Who writes candidates: the protocol (``base``), the LLM proposer over any OpenAI-compatible
endpoint (``llm``, ``chat``, ``wire``) and its distributed variant (``overlap_llm``), the built-in
policies (``policy``, ``overlap_policy``), a script (``scripted``), and the parsing of a model's
reply into a candidate (``llm.parse_reply``, ``overlap_reply``): reply parsing is the proposers',
never the evaluators'.

Imports agent.verification, agent.distributed (the candidate types it proposes) and the layers
below; never the loop or the CLI.
"""
