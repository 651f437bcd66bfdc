// The passkey ceremonies (W3C WebAuthn Level 3) of the hosted login and of the console
// (its sign-in and the account's Security page), no framework.
//
// The page's form[data-passkey-options] carries the options the server made (a
// single-use challenge of the API's PasskeyService) and hidden fields challenge_id and
// credential.  The browser parses the options itself
// (PublicKeyCredential.parseRequestOptionsFromJSON, or parseCreationOptionsFromJSON on
// the offer to add a passkey: data-passkey-create) and serialises the answer with
// toJSON(); the form then posts it like any other step, so the server continues the
// authorization exactly as after a password.
//
// On the login page (data-passkey-autofill) the email field also offers the browser's
// passkeys as autofill suggestions (conditional mediation); the button asks directly.

const form = document.querySelector("form[data-passkey-options]");

const creating = form !== null && "passkeyCreate" in form.dataset;

function supported() {
  return typeof PublicKeyCredential === "function" &&
    typeof PublicKeyCredential.parseRequestOptionsFromJSON === "function" &&
    typeof PublicKeyCredential.parseCreationOptionsFromJSON === "function";
}

function say(message) {
  const status = document.getElementById("passkey-status");
  status.textContent = message;
}

async function ask(mediation, signal) {
  const options = JSON.parse(form.dataset.passkeyOptions);
  const credential = creating
    ? await navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options) })
    : await navigator.credentials.get({
      publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options), mediation, signal });
  form.elements.credential.value = JSON.stringify(credential.toJSON());
  form.submit();
}

function refused(error) {
  if (error.name === "AbortError") return;  // our own abort of the autofill request
  if (creating && error.name === "InvalidStateError") {
    say("This device already has a passkey for your account.");
  } else if (error.name === "NotAllowedError") {
    say(creating ? "No passkey was added: it was cancelled or timed out. Try again."
      : "The passkey sign-in was cancelled or timed out. Try again, or use another way to sign in.");
  } else {
    say("This browser could not use a passkey here. Use another way to sign in.");
  }
}

async function start() {
  if (!form || !supported()) return;
  const button = form.querySelector("button[data-passkey-button]");
  let autofill = null;
  if ("passkeyAutofill" in form.dataset && await PublicKeyCredential.isConditionalMediationAvailable?.()) {
    autofill = new AbortController();
    ask("conditional", autofill.signal).catch(refused);
  }
  button.hidden = false;
  button.addEventListener("click", () => {
    // Adding a passkey asks for the password too (the console): say so before the
    // browser's dialog, not after it.
    if (creating && !form.reportValidity()) return;
    // One ceremony at a time: the autofill request yields to the button's.
    if (autofill) autofill.abort();
    say("");
    ask("optional").catch(refused);
  });
}

start();
