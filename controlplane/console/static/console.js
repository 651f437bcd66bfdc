// The console's own script (no inline script anywhere: the policy is script-src 'self').
// Dates and counts in the reader's locale, the session's end announced before it comes, the
// delete button enabled only once the application's name is typed, and the copy buttons of
// secrets shown once.
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

document.addEventListener("DOMContentLoaded", () => {
  localTimes(document);
  localNumbers(document);
  watchSession();
  confirmByName(document);
  copyButtons(document);
});
document.addEventListener("htmx:afterSwap", (event) => localTimes(event.detail.elt));
