// The statifier console's only script (no build step). It opens the confirmation dialogs,
// and keeps an execution's page current: the server sends an event when the execution
// changes, and the page swaps in a fresh server-rendered (escaped) fragment of itself.
"use strict";

function wireDialogs(root) {
  root.querySelectorAll("[data-dialog]").forEach((button) => {
    button.addEventListener("click", () => {
      const dialog = document.getElementById(button.dataset.dialog);
      if (dialog && !button.disabled) dialog.showModal();
    });
  });
}

document.querySelectorAll("dialog [data-close]").forEach((button) => {
  button.addEventListener("click", () => button.closest("dialog").close());
});
document.querySelectorAll("dialog form").forEach((form) => {
  // A confirmed form is sent once: a second click while it is on its way does nothing.
  form.addEventListener("submit", () => {
    form.querySelectorAll("button[type=submit]").forEach((b) => { b.disabled = true; });
  });
});
wireDialogs(document);

const live = document.getElementById("live");
const indicator = document.getElementById("live-indicator");
if (live && window.EventSource) {
  let version = live.dataset.version;
  let fetching = null;
  const refresh = async () => {
    const response = await fetch(live.dataset.fragment, {
      credentials: "same-origin",
      headers: { Accept: "text/html" },
    });
    if (!response.ok) return;
    live.innerHTML = await response.text();
    wireDialogs(live);
  };
  const source = new EventSource(live.dataset.stream);
  source.addEventListener("open", () => indicator && indicator.classList.add("on"));
  source.addEventListener("error", () => indicator && indicator.classList.remove("on"));
  source.addEventListener("change", (event) => {
    const change = JSON.parse(event.data);
    if (change.version === version) return;
    version = change.version;
    fetching = (fetching || Promise.resolve()).then(refresh).catch(() => {});
  });
  // The execution can change no more (ended), or it is gone: stop listening.
  for (const last of ["ended", "gone"]) {
    source.addEventListener(last, () => {
      source.close();
      if (indicator) indicator.classList.remove("on");
    });
  }
}
