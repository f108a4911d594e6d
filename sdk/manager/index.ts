export * from "./ids.js";
export * from "./events.js";
export * from "./fleet-source.js";
export * from "./pool.js";
export * from "./single-flight.js";
export * from "./manager.js";
export * from "./local-manager.js";
