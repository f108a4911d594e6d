/** Pulumi layer: one dynamic resource per workspace, a fleet component, and the diff logic. */
export { WorkspaceResource, WORKSPACE_MODULE, WORKSPACE_TYPE, type WorkspaceResourceArgs } from "./resource.js";
export { WorkspaceFleet, loadFleetFile, FleetFileSchema, type WorkspaceFleetArgs, type FleetWorkspaceInput, type FleetWorkspaceSpec } from "./fleet.js";
export { isSecretRef, type SecretValue } from "./secret-fields.js";
export { DataLedger, LEDGER_TYPE, type DataLedgerArgs } from "./ledger.js";
export type { DataHome } from "./ledger-state.js";
export { workspaceProvider, ledgerProvider } from "./provider.js";
export { workspaceProviderImpl, ledgerProviderImpl, parseBackend, setProviderLogger, OUTPUTS_SCHEMA_VERSION } from "./impl.js";
export { diffWorkspace, stableJson, type WorkspaceDiff, type FieldChange, type ChangeKind } from "./diff.js";
export { checkInputs, defaultWorkspaceId, UNKNOWN, type CheckFailure } from "./inputs.js";
export { FLEET_OUTPUT_NAME, FleetOutputsSchema, SecretRefSchema, secretFieldPaths, maskSecretFields } from "../sdk/contract/fleet.js";
export { type FleetOutputs, type SecretRef } from "../sdk/contract/fleet.js";
