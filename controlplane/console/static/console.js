// The console's own script (no inline script anywhere: the policy is script-src 'self').
// Dates and counts in the reader's locale, the session's end announced before it comes, the
// delete button enabled only once the application's name is typed, the copy buttons of
// secrets shown once, and the loading state of a request in flight.
"use strict";

function localTimes(root) {
  for (const el of root.querySelectorAll("time[datetime]")) {
    const when = new Date(el.getAttribute("datetime"));
    if (!Number.isNaN(when.getTime())) {
      el.textContent = when.toLocaleString(undefined, {dateStyle: "medium", timeStyle: "short"});
    }
  }
}

// Counts (class="number") in the reader's locale: 12,345 or 12 345.
function localNumbers(root) {
  for (const el of root.querySelectorAll(".number")) {
    const value = Number(el.textContent);
    if (el.textContent.trim() !== "" && Number.isFinite(value)) el.textContent = value.toLocaleString();
  }
}

function watchSession() {
  const expiry = document.getElementById("session-expiry");
  const warning = document.getElementById("session-warning");
  if (!expiry || !warning) return;
  const ends = new Date(expiry.dataset.expires).getTime();
  const check = () => {
    if (ends - Date.now() < 5 * 60 * 1000) warning.hidden = false;
  };
  check();
  setInterval(check, 30 * 1000);
}

function confirmByName(root) {
  for (const button of root.querySelectorAll("button[data-confirm-name]")) {
    const input = button.form.querySelector("input[name=confirm_name]");
    const sync = () => { button.disabled = input.value !== button.dataset.confirmName; };
    input.addEventListener("input", sync);
    sync();
  }
}

// A secret shown once (an API key, a client or webhook secret, backup codes, the TOTP
// secret) copied with one click; the status next to the button (or the button itself)
// says so, to screen readers too.
function copyButtons(root) {
  for (const button of root.querySelectorAll("button[data-copy]")) {
    const source = document.getElementById(button.dataset.copy);
    const status = document.querySelector(`[data-copied-for="${button.dataset.copy}"]`);
    const say = (text) => { (status || button).textContent = text; };
    button.addEventListener("click", async () => {
      const text = source.value !== undefined ? source.value : source.innerText;
      try {
        await navigator.clipboard.writeText(text.trim());
        say("Copied.");
      } catch (_error) {
        if (source.select) source.select();
        say("Copy it by hand: the browser refused.");
      }
    });
  }
}

// Loading states.  While a request the visitor asked for is in flight (a click, a submit;
// not a poll or a check as they type, whose element carries hx-trigger), the busy pill
// shows, the status region says "Loading…", and the form's buttons are disabled so a
// write is not sent twice.  The region htmx will swap is aria-busy meanwhile, whatever
// started the request.  A plain form post (no htmx) shows the same until the next page.
const inFlight = new Set();

function showBusy() {
  const pill = document.getElementById("busy");
  const status = document.getElementById("busy-status");
  if (!pill || !status) return;
  pill.hidden = inFlight.size === 0;
  status.textContent = inFlight.size ? "Loading…" : "";
}

function holdButtons(form, hold) {
  if (!form || form.tagName !== "FORM") return;
  for (const button of form.querySelectorAll("button")) {
    if (hold && !button.disabled) {
      button.disabled = true;
      button.dataset.busyHeld = "";
    } else if (!hold && "busyHeld" in button.dataset) {
      button.disabled = false;
      delete button.dataset.busyHeld;
    }
  }
}

// The end is the request's own loadend, after htmx's swap: htmx:afterRequest is fired on
// the element that asked, which an outerHTML swap of its region has taken out of the
// document, so the event never reaches this listener.
document.addEventListener("htmx:beforeRequest", (event) => {
  const {elt, target, xhr} = event.detail;
  if (target) target.setAttribute("aria-busy", "true");
  const visible = !elt.hasAttribute("hx-trigger");
  if (visible) {
    inFlight.add(elt);
    holdButtons(elt, true);  // htmx has read the form's values already
    showBusy();
  }
  xhr.addEventListener("loadend", () => {
    if (target) target.removeAttribute("aria-busy");
    if (visible && inFlight.delete(elt)) {
      holdButtons(elt, false);
      showBusy();
    }
    keepPagerFocus(elt, target);
  });
});

// A pager link swapped out with its list: the keyboard's focus goes to the new pager's
// link of the same direction (or its other one), not back to the top of the page.
function keepPagerFocus(elt, target) {
  if (elt.isConnected || !elt.closest(".pager") || !target || !target.id) return;
  const pager = document.getElementById(target.id)?.querySelector(".pager");
  const link = pager && (pager.querySelector(`a[rel="${elt.rel}"]`) || pager.querySelector("a"));
  if (link) link.focus();
}

document.addEventListener("submit", (event) => {
  const form = event.target;
  if (event.defaultPrevented) return;  // htmx's own (hx-post, boosted) forms
  form.setAttribute("aria-busy", "true");
  inFlight.add(form);
  showBusy();
  // After the submission has taken the clicked button's name and value.
  setTimeout(() => holdButtons(form, true), 0);
});

// Back to a page kept in the back/forward cache: nothing is in flight any more.
window.addEventListener("pageshow", (event) => {
  if (!event.persisted) return;
  for (const elt of inFlight) {
    elt.removeAttribute("aria-busy");
    holdButtons(elt, false);
  }
  inFlight.clear();
  showBusy();
});

document.addEventListener("DOMContentLoaded", () => {
  localTimes(document);
  localNumbers(document);
  watchSession();
  confirmByName(document);
  copyButtons(document);
});
document.addEventListener("htmx:afterSwap", (event) => {
  localTimes(event.detail.elt);
  localNumbers(event.detail.elt);
});
