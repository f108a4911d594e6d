/**
 * Replaces every occurrence of each secret in `text`. Longest first, so a secret that contains
 * another is masked whole rather than leaving its tail; values under 4 characters are skipped, as
 * masking them would garble ordinary text.
 */
export function maskSecrets(text: string, secrets: Iterable<string>, replacement = "[secret]"): string {
  let out = text;
  for (const s of [...secrets].filter((x) => x.length >= 4).sort((a, b) => b.length - a.length)) out = out.split(s).join(replacement);
  return out;
}
