"""rk_agent.policies: every model the rollout engine can talk to, and what each needs.

Between the environments and the rollouts (envs -> policies -> rollouts -> trainers): a policy
turns a conversation into the next assistant message; the engine (`rk_agent.rollouts`) plays
episodes with one and knows nothing else about models.

Modules:
    policy: the `Policy` protocol, `SamplingParams`, `PolicyOutput`, `Usage`.
    openai_policy / vllm_policy: OpenAI-compatible servers (`OpenAIPolicy`), and vLLM's
        token-in, token-out endpoint (`VLLMPolicy`).
    hf_policy: a local Hugging Face model with dynamic batching (`HFPolicy`); its generation
        (``_hf_generation``) and KV-cache reuse across turns (``_kv_reuse``).
    function_policy: your function as a policy (`FunctionPolicy`, `tool_call`), as the
        reference solvers are.
    chat_template: the model's chat template, rendering and parsing replies.
    local_model: the embedded model and local model folders (`resolve_model`).
    episode_tokens: token-exact episodes and their environment mask (`EpisodeTokens`), the
        training view of a policy's turns.

The served policies' HTTP client is `rk_agent.model_client` (with `rk_agent.http1`), below
the rewards, which the LLM judge shares. Users import the policies from `rk_agent`; the test
doubles are in `rk_agent.testing`.
"""
