// Copying a field's text: a page on plain http has no clipboard API, so the field is
// selected and copied the old way (or left selected for Ctrl+C).

/** Copy `input.value`, saying in `note` what happened. */
export async function copyField(input, note) {
  try {
    if (navigator.clipboard && window.isSecureContext) await navigator.clipboard.writeText(input.value);
    else {
      input.select();
      document.execCommand("copy");
    }
    note.textContent = "copied";
  } catch {
    input.select();
    note.textContent = "selected: copy it with Ctrl+C";
  }
}
