"""rk_agent.fireworks: Fireworks AI evaluators, datasets and RFT jobs.

Modules: `auth` (credentials), `client` (HTTP, retries, errors), `dry_run`, `datasets`,
`packaging` (a reward as an uploadable archive), `evaluators` (deploy, preview), `rft` (jobs),
`rft_data` (dataset rows from trajectories or tasks) and `launch` (all of it in one call).
Everything here follows Fireworks' documented API and has been exercised against the fake
only (`rk_agent.testing.FakeFireworks`); see the docs' Fireworks page.
"""
