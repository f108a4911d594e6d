import type * as pulumi from "@pulumi/pulumi";

/**
 * The serialized dynamic provider. Pulumi stores this object's source as `__provider` in state
 * and runs it in its own process, so it captures nothing but a loader: every method imports
 * the installed package's implementation (`agent-workspaces/providers/impl`, compiled JS:
 * light, without the Pulumi SDK) through the package's own name, which resolves from the program directory. Provider logic therefore ships with the
 * package, and delete/refresh of old state run the current code rather than a frozen copy.
 *
 * The loader is built with `new Function` on purpose: bundlers and test runners rewrite a
 * literal dynamic import into helpers that cannot be serialized.
 */
const loadImpl = new Function("return import('agent-workspaces/providers/impl')") as () => Promise<typeof import("./impl.js")>;

type Props = Record<string, unknown>;

export const workspaceProvider: pulumi.dynamic.ResourceProvider = {
  async configure(req) {
    const { workspaceProviderImpl } = await loadImpl();
    await workspaceProviderImpl.configure(req.config);
  },
  async check(olds: Props, news: Props) {
    const { workspaceProviderImpl } = await loadImpl();
    return workspaceProviderImpl.check(olds, news);
  },
  async diff(id: string, olds: Props, news: Props) {
    const { workspaceProviderImpl } = await loadImpl();
    return workspaceProviderImpl.diff(id, olds, news);
  },
  async create(inputs: Props) {
    const { workspaceProviderImpl } = await loadImpl();
    return workspaceProviderImpl.create(inputs);
  },
  async read(id: string, props?: Props) {
    const { workspaceProviderImpl } = await loadImpl();
    return workspaceProviderImpl.read(id, props);
  },
  async update(id: string, olds: Props, news: Props) {
    const { workspaceProviderImpl } = await loadImpl();
    return workspaceProviderImpl.update(id, olds, news);
  },
  async delete(id: string, props: Props) {
    const { workspaceProviderImpl } = await loadImpl();
    await workspaceProviderImpl.delete(id, props);
  },
};

/** The serialized provider of the fleet's data ledger (see ledgerProviderImpl); the same loader. */
export const ledgerProvider: pulumi.dynamic.ResourceProvider = {
  // The stack's credentials, for a driver that needs them to remove files.
  async configure(req) {
    const { workspaceProviderImpl } = await loadImpl();
    await workspaceProviderImpl.configure(req.config);
  },
  async check(olds: Props, news: Props) {
    const { ledgerProviderImpl } = await loadImpl();
    return ledgerProviderImpl.check(olds, news);
  },
  async diff(id: string, olds: Props, news: Props) {
    const { ledgerProviderImpl } = await loadImpl();
    return ledgerProviderImpl.diff(id, olds, news);
  },
  async create(inputs: Props) {
    const { ledgerProviderImpl } = await loadImpl();
    return ledgerProviderImpl.create(inputs);
  },
  async read(id: string, props?: Props) {
    const { ledgerProviderImpl } = await loadImpl();
    return ledgerProviderImpl.read(id, props);
  },
  async update(id: string, olds: Props, news: Props) {
    const { ledgerProviderImpl } = await loadImpl();
    return ledgerProviderImpl.update(id, olds, news);
  },
  async delete(id: string, props: Props) {
    const { ledgerProviderImpl } = await loadImpl();
    await ledgerProviderImpl.delete(id, props);
  },
};
