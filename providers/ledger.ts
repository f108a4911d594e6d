import * as pulumi from "@pulumi/pulumi";
import type { DataHome } from "./ledger-state.js";
import { ledgerProvider } from "./provider.js";
import { WORKSPACE_MODULE } from "./resource.js";

/** The Pulumi type token: `pulumi-nodejs:dynamic/agentws:DataLedger`. */
export const LEDGER_TYPE = "DataLedger";

export interface DataLedgerArgs {
  /** The fleet's deleteData: a destroy removes the recorded leftovers only when it is on. */
  deleteData: boolean;
  /** Where each workspace of the fleet keeps its files now (dataHomeOf of each spec). */
  homes: DataHome[];
}

/**
 * One per fleet: the record of every place a workspace of the fleet left its files behind (a
 * replace to another folder, or a removal, with deleteData off), so that a later destroy with
 * deleteData on removes them too, through the backend's own driver. WorkspaceFleet creates it
 * before its workspaces and makes them depend on it, so the engine deletes it after them.
 * Its state is plain: workspace ids, owners, backend kinds and folder paths; never secrets.
 */
export class DataLedger extends pulumi.dynamic.Resource {
  declare readonly deleteData: pulumi.Output<boolean>;
  declare readonly homes: pulumi.Output<DataHome[]>;
  declare readonly leftovers: pulumi.Output<DataHome[]>;

  constructor(name: string, args: DataLedgerArgs, opts: pulumi.CustomResourceOptions = {}) {
    super(ledgerProvider, name, { deleteData: args.deleteData, homes: args.homes, leftovers: undefined }, opts, WORKSPACE_MODULE, LEDGER_TYPE);
  }
}
