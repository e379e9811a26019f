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
  // The filters apply as soon as a choice changes.
  const filters = document.getElementById("filters");
  if (filters) {
    for (const select of filters.querySelectorAll("select")) {
      select.addEventListener("change", () => filters.submit());
    }
  }
});
