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
  // Following a link to a folded tool result (or to a turn's token ids) opens it.
  const openTarget = () => {
    const target = location.hash ? document.getElementById(location.hash.slice(1)) : null;
    const fold = target && target.tagName === "DETAILS" ? target
      : target ? target.querySelector("details.fold") : null;
    if (fold) fold.open = true;
  };
  window.addEventListener("hashchange", openTarget);
  openTarget();
  // A running run's page (and the runs page while a run is read) fetches itself again every
  // few seconds and swaps in the parts named in data-swap (the server escaped them: they are
  // its own markup, as on a reload).
  const live = document.querySelector("[data-refresh]");
  if (live) {
    const seconds = Number(live.dataset.refresh) || 3;
    const swap = (live.dataset.swap || "").split(" ").filter(Boolean);
    const refresh = async () => {
      const response = await fetch(location.href, { headers: { Accept: "text/html" } });
      if (response.status !== 200) return;  // 202: the run is being read again
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      for (const id of swap) {
        const now = document.getElementById(id), next = fresh.getElementById(id);
        if (now && next && now.outerHTML !== next.outerHTML) {
          now.replaceWith(document.importNode(next, true));
        }
      }
      if (!fresh.querySelector("[data-refresh]")) clearInterval(timer);
    };
    const timer = setInterval(() => { refresh().catch(() => {}); }, seconds * 1000);
  }
  // While a big run is read for the first time, its progress is polled and the page asked for
  // is loaded when the index is done.
  const indexing = document.getElementById("indexing");
  if (indexing) {
    const bar = document.getElementById("index-progress");
    const share = document.getElementById("index-share");
    const poll = async () => {
      const response = await fetch(indexing.dataset.progress, { headers: { Accept: "application/json" } });
      if (!response.ok) return;
      const state = await response.json();
      bar.value = state.share;
      share.textContent = `${Math.floor(state.share * 100)}%`;
      if (state.ready) {
        clearInterval(poller);
        location.reload();
      }
    };
    const poller = setInterval(() => { poll().catch(() => {}); }, 500);
  }
  // The filters apply as soon as a choice changes.
  // (Listened for on the form: a running run's page swaps its alarm choice in.)
  const filters = document.getElementById("filters");
  if (filters) {
    filters.addEventListener("change", (event) => {
      if (event.target.tagName === "SELECT") filters.submit();
    });
  }
});
