// The agent page redraws itself when the agent changes: it polls the
// agent's event sequence every few seconds (data-poll ms) and, when it
// moved, fetches the page again and swaps in the new #live section.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live) { return; }
  var seq = live.getAttribute("data-seq");
  var every = parseInt(live.getAttribute("data-poll"), 10) || 3000;
  var busy = false;
  function tick() {
    if (busy || document.hidden) { return; }
    busy = true;
    fetch(live.getAttribute("data-live"), { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (r.status === 401) { window.location.reload(); throw new Error("signed out"); }
        if (!r.ok) { throw new Error("status " + r.status); }
        return r.text();
      })
      .then(function (now) {
        if (now === seq) { return null; }
        live.classList.add("stale");
        return fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
          .then(function (r) { return r.text(); })
          .then(function (html) {
            var doc = new DOMParser().parseFromString(html, "text/html");
            var fresh = doc.getElementById("live");
            if (fresh) {
              live.innerHTML = fresh.innerHTML;
              seq = fresh.getAttribute("data-seq");
              live.setAttribute("data-seq", seq);
            }
            live.classList.remove("stale");
          });
      })
      .catch(function () { live.classList.remove("stale"); })
      .then(function () { busy = false; });
  }
  setInterval(tick, every);
})();
