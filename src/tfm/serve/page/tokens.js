// How the page of `tfm serve` shows tokens: byte-fallback tokens as the characters they spell.
"use strict";

// Byte-fallback tokens as the characters they spell: <0x3C> is "<", and the three bytes of
// "€" (<0xE2><0x82><0xAC>) are "€ 1/3", "€ 2/3", "€ 3/3"; a byte that spells nothing is
// "byte 0xFF".
function readable(tokens) {
  const byteOf = (token) => {
    const found = /^<0x([0-9A-F]{2})>$/.exec(token);
    return found ? parseInt(found[1], 16) : null;
  };
  const shown = tokens.slice();
  for (let i = 0; i < tokens.length;) {
    const lead = byteOf(tokens[i]);
    if (lead === null) { i++; continue; }
    const size = lead < 0x80 ? 1 : lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 0;
    const bytes = tokens.slice(i, i + size).map(byteOf);
    let text = null;
    if (size > 0 && bytes.length === size && !bytes.includes(null)) {
      try {
        text = new TextDecoder("utf-8", { fatal: true }).decode(new Uint8Array(bytes));
      } catch {
        text = null;
      }
    }
    if (text === null) {
      shown[i] = "byte " + tokens[i].slice(1, -1);
      i++;
      continue;
    }
    for (let k = 0; k < size; k++) shown[i + k] = size === 1 ? text : `${text} ${k + 1}/${size}`;
    i += size;
  }
  return shown;
}
