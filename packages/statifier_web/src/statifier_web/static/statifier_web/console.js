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
  // The browser reconnects a stream that ends on its own, but gives up on one refused
  // outright (503: too many streams, the store unreachable): the page listens again
  // itself, a little later each time, until the execution can change no more.
  const firstWaitMs = 2000;
  const longestWaitMs = 30000;
  let waitMs = firstWaitMs;
  let finished = false;
  const listen = () => {
    const source = new EventSource(live.dataset.stream);
    source.addEventListener("open", () => {
      waitMs = firstWaitMs;
      if (indicator) indicator.classList.add("on");
    });
    source.addEventListener("error", () => {
      if (indicator) indicator.classList.remove("on");
      if (source.readyState === EventSource.CLOSED && !finished) {
        setTimeout(listen, waitMs);
        waitMs = Math.min(2 * waitMs, longestWaitMs);
      }
    });
    source.addEventListener("change", (event) => {
      const change = JSON.parse(event.data);
      if (change.version === version) return;
      version = change.version;
      fetching = (fetching || Promise.resolve()).then(refresh).catch(() => {});
    });
    // The execution can change no more (ended), or it is gone: stop listening.
    for (const last of ["ended", "gone"]) {
      source.addEventListener(last, () => {
        finished = true;
        source.close();
        if (indicator) indicator.classList.remove("on");
      });
    }
  };
  listen();
}
