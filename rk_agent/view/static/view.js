// rk-agent view: the little behaviour the pages have. Pages work without it.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // "unfold all" / "fold all": open or close every folded message of the page.
  for (const button of document.querySelectorAll("button.toggle-folds")) {
    button.addEventListener("click", () => {
      const folds = document.querySelectorAll("details.fold");
      const open = button.textContent === "unfold all";
      folds.forEach((d) => { d.open = open; });
      button.textContent = open ? "fold all" : "unfold all";
    });
  }
  // Following a link to a folded tool result opens it.
  const openTarget = () => {
    const target = location.hash ? document.getElementById(location.hash.slice(1)) : null;
    const fold = target ? target.querySelector("details.fold") : null;
    if (fold) fold.open = true;
  };
  window.addEventListener("hashchange", openTarget);
  openTarget();
  // A running run's page fetches itself again every few seconds and swaps in the parts that
  // change (the server escaped them: they are its own markup, as on a reload).
  const live = document.querySelector("[data-refresh]");
  if (live) {
    const seconds = Number(live.dataset.refresh) || 3;
    const swap = ["summary-section", "count", "episodes"];
    const refresh = async () => {
      const response = await fetch(location.href, { headers: { Accept: "text/html" } });
      if (!response.ok) return;
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      for (const id of swap) {
        const now = document.getElementById(id), next = fresh.getElementById(id);
        if (now && next) now.replaceWith(document.importNode(next, true));
      }
      if (!fresh.querySelector("[data-refresh]")) clearInterval(timer);
    };
    const timer = setInterval(() => { refresh().catch(() => {}); }, seconds * 1000);
  }
  // The filters apply as soon as a choice changes.
  const filters = document.getElementById("filters");
  if (filters) {
    for (const select of filters.querySelectorAll("select")) {
      select.addEventListener("change", () => filters.submit());
    }
  }
});
