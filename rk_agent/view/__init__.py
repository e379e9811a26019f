"""``rk-agent view``: a local, read-only web page of runs, episodes and comparisons.

- `rk_agent.view.catalog`: the runs found under the paths given, and each one's summary line;
- `rk_agent.view.index`: a trajectories file's index (byte offsets and the fields filters need);
- `rk_agent.view.filters`: which episodes the run page lists;
- `rk_agent.view.listing`: one page of a filtered episode list;
- `rk_agent.view.episode`: one episode laid out turn by turn;
- `rk_agent.view.app`: the web app (pages, templates, the shipped stylesheet and script);
- `rk_agent.view.serve`: binding rules and the server behind ``rk-agent view``.
"""
