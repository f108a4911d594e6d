/**
 * One in-flight promise per key: concurrent callers for a key share it, different keys run in
 * parallel, and a settled promise (fulfilled or rejected) is forgotten so the next call retries.
 */
export class SingleFlight<K, V> {
  readonly #flights = new Map<K, Promise<V>>();

  get size(): number {
    return this.#flights.size;
  }

  get(key: K): Promise<V> | undefined {
    return this.#flights.get(key);
  }

  /** Joins the flight for `key`, or starts `fn` as that flight. */
  run(key: K, fn: () => Promise<V>): Promise<V> {
    const existing = this.#flights.get(key);
    if (existing) return existing;
    const flight = fn();
    this.#flights.set(key, flight);
    const forget = (): void => {
      if (this.#flights.get(key) === flight) this.#flights.delete(key);
    };
    flight.then(forget, forget);
    return flight;
  }

  /** Resolves when every current flight has settled; never rejects. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.#flights.values()]);
  }
}
