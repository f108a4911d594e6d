// A host process that opens a runner channel, starts a long command and then waits to be killed
// (runner-http.test.ts kills it to play a host that dies without closing its channel).
import { RunnerClient } from "../../sdk/kit/runner/index.js";
import { startHttpRunner } from "../../sdk/kit/runner/http-channel.js";

const t = startHttpRunner(JSON.parse(process.env.AGENTWS_HTTP_EP!));
const client = new RunnerClient(t);
await client.ready;
void client.exec({ argv: ["sh", "-c", `echo $$ > "$0"; exec sleep 600`, process.env.AGENTWS_MARKER!], cwd: "", env: {}, maxOutputBytes: 10 });
console.log(String(t.runnerPid()));
setInterval(() => undefined, 1000);
