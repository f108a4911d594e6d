/**
 * Takes the frames queued for a transport that sends in calls (an HTTP POST, an SDK's send-stdin): as many
 * as fit in `max` bytes together, at least one, in order, joined into one buffer (no copy for a lone frame).
 */
export function takeBatch(queue: Buffer[], max: number): { data: Buffer; frames: number } {
  const parts: Buffer[] = [];
  let n = 0;
  while (queue.length && (n === 0 || n + queue[0]!.length <= max)) {
    const b = queue.shift()!;
    parts.push(b);
    n += b.length;
  }
  return { data: parts.length === 1 ? parts[0]! : Buffer.concat(parts, n), frames: parts.length };
}
