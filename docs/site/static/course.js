// The course's additions to sphinx-book-theme (docs/site/conf.py: html_js_files).
// Every figure a lesson drew opens at full size with a tap, where a phone's pinch-zoom can read
// its labels; the figure's alt text goes with it.
document.addEventListener("DOMContentLoaded", () => {
  for (const img of document.querySelectorAll("div.cell_output img")) {
    if (img.closest("a")) continue;
    const link = document.createElement("a");
    link.href = img.src;
    link.className = "course-full-size";
    link.title = "Open the figure at full size";
    img.replaceWith(link);
    link.appendChild(img);
  }
});

// Accessible names that say what a reader sees (axe-core's label rules; tests/test_site.py runs it):
// the theme's search button and myst-nb's "Show code cell source" toggles carry an aria-label other
// than their visible text, and the instructor guide's checklist boxes have no label of their own.
document.addEventListener("DOMContentLoaded", () => {
  const visible = (element) => element.textContent.replace(/\s+/g, " ").trim();
  const labelled = "button.search-button__button[aria-label], details > summary[aria-label]";
  for (const element of document.querySelectorAll(labelled)) {
    if (visible(element)) element.removeAttribute("aria-label"); // the name is then what it shows
  }
  for (const box of document.querySelectorAll("input.task-list-item-checkbox:not([aria-label])")) {
    box.setAttribute("aria-label", visible(box.closest("li")).slice(0, 120));
  }
});

// The language switch (templates/language-switch.html) on a search page keeps the reader's query:
// the same search, in the other language's edition.
document.addEventListener("DOMContentLoaded", () => {
  for (const link of document.querySelectorAll("a.course-language-switch")) {
    const target = new URL(link.href);
    if (location.search && target.pathname.endsWith("/search.html")) {
      target.search = location.search;
      link.href = target.href;
    }
  }
});
