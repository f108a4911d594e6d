// Every contract suite against LocalWorkspace. Keep this a plain list of imports and calls.
import { layoutContract } from "../../contract/layout.contract.js";
import { lifecycleContract } from "../../contract/lifecycle.contract.js";
import { offloadContract } from "../../contract/offload.contract.js";
import { skillsContract } from "../../contract/skills.contract.js";
import { localFixture } from "../../support/local-fixture.js";
import { mcpContract } from "../../contract/mcp.contract.js";
import { toolsContract } from "../../contract/tools.contract.js";

const fixture = localFixture();

layoutContract(fixture);
skillsContract(fixture);
offloadContract(fixture);
lifecycleContract(fixture);
mcpContract(fixture);
toolsContract(fixture);
