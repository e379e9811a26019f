"""rk_agent.fireworks: Fireworks AI evaluators, datasets and RFT jobs, and a fake API to test with.

Modules: `auth` (credentials), `client` (HTTP, retries, errors), `dry_run`, `datasets`,
`packaging` (a reward as an uploadable archive), `evaluators` (deploy, preview), `rft` (jobs),
`rft_data` (dataset rows from trajectories or tasks), `launch` (all of it in one call) and
`fake_api` (the test double). Everything here follows Fireworks' documented API and has been
exercised against the fake only; see the docs' Fireworks page.
"""
