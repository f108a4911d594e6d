/**
 * A warning from inside Pulumi's dynamic-provider process to the engine, which shows it among the
 * update's diagnostics (a provider's stderr is only logged at debug verbosity). The process is
 * started as `node .../cmd/dynamic-provider <engine address>`; elsewhere (tests, the host process)
 * this does nothing and says so. Best effort: a failure to send is ignored.
 */
export async function warnEngine(message: string): Promise<boolean> {
  const address = process.argv[2];
  if (!address || !/dynamic-provider/.test(process.argv[1] ?? "")) return false;
  try {
    // CommonJS modules whose exports only `.default` carries when imported from ESM.
    const cjs = async <T>(specifier: string): Promise<T> => {
      const m = (await import(specifier)) as { default?: T };
      return (m.default ?? m) as T;
    };
    const grpc = await cjs<typeof import("@grpc/grpc-js")>("@grpc/grpc-js");
    const rpc = await cjs<{ EngineClient: new (address: string, credentials: unknown) => EngineClient }>("@pulumi/pulumi/proto/engine_grpc_pb.js");
    const pb = await cjs<{ LogRequest: new () => LogRequest; LogSeverity: { WARNING: number } }>("@pulumi/pulumi/proto/engine_pb.js");
    const client = new rpc.EngineClient(address, grpc.credentials.createInsecure());
    const request = new pb.LogRequest();
    request.setSeverity(pb.LogSeverity.WARNING);
    request.setMessage(message);
    await new Promise<void>((resolve) => client.log(request, new grpc.Metadata(), { deadline: Date.now() + 5_000 }, () => resolve()));
    client.close();
    return true;
  } catch {
    return false;
  }
}

interface LogRequest {
  setSeverity(value: number): LogRequest;
  setMessage(value: string): LogRequest;
}

interface EngineClient {
  log(request: LogRequest, metadata: unknown, options: { deadline: number }, callback: (error: unknown) => void): void;
  close(): void;
}
