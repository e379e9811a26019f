"""Self-hosting a reward: build contexts for Docker, Cloud Run and AWS Lambda, and tunnels.

``rk-agent deploy --target docker|gcp-cloud-run|aws-lambda`` and ``reward.deploy(target=...)``
write a directory that serves the reward with ``rk-agent serve`` (or Mangum on Lambda) and, when
asked and the tool is installed, run ``docker``, ``gcloud`` or ``sam`` on it. ``rk-agent serve
--tunnel`` exposes a local server through ``cloudflared`` or ``ngrok``.

One module per target, each registered by name in `rk_agent.rewards.deploy_targets`:

- `rk_agent.selfhost.context`: the shared part (`BuildContext`, `render_context`, `Command`,
  `SelfHostDeployment`);
- `rk_agent.selfhost.docker`: `deploy_docker` (``"docker"``);
- `rk_agent.selfhost.cloud_run`: `deploy_cloud_run` (``"gcp-cloud-run"``);
- `rk_agent.selfhost.aws_lambda`: `deploy_lambda` (``"aws-lambda"``);
- `rk_agent.selfhost.tunnel`: `find_tunnel_client`, `open_tunnel`;
- `rk_agent.selfhost.command`: `deploy_elsewhere`, what ``rk-agent deploy --target`` calls.

Nothing here is imported by ``import rk_agent``; the modules load when a target is used.
"""
