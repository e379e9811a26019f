"""``rk-agent view``: a local, read-only web page of runs, episodes and comparisons.

- `rk_agent.view.catalog`: the runs found under the paths given, and each one's summary line;
- `rk_agent.view.index`: a trajectories file's index (byte offsets and the fields filters need);
- `rk_agent.view.filters`: which episodes the run page lists (by alarm too);
- `rk_agent.view.listing`: one page of a filtered episode list;
- `rk_agent.view.training`: a training run's record and watch, and its charts per step;
- `rk_agent.view.charts`: line charts and histograms, drawn by the server as SVG;
- `rk_agent.view.episode`: one episode laid out turn by turn (its token ids and drift too);
- `rk_agent.view.app`: the web app (pages, templates, the shipped stylesheet and script);
- `rk_agent.view.serve`: binding rules and the server behind ``rk-agent view``.
"""
