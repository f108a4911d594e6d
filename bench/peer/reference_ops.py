"""Reference side of the peer benchmark: AgentScope's workspace module.

Runs inside the venv made by scripts/peer-venv.sh. Speaks JSON lines on
stdin/stdout, one request per line, one reply per line:

  {"id": 1, "op": "bench", "name": "offload_tool_result_small", "fixtures": DIR}
      -> {"id": 1, "ok": true, "ms": 12.3, "count": 1000}
  {"id": 2, "op": "scenario", "steps": [...], "workdir": DIR}
      -> {"id": 2, "ok": true, "results": [...]}
  {"id": 3, "op": "version"} -> {"id": 3, "ok": true, "version": "2.0.11", ...}

Each bench operation builds its inputs first (untimed), then times only the
calls under test with time.perf_counter, then cleans up (untimed). Inputs
come from the fixtures directory that bench/peer/fixtures.ts writes, so
both runtimes see byte-identical skills and payloads.

The protocol owns the real stdout: the library's own prints and logs are
sent to stderr so they can never corrupt a reply line.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import traceback
from typing import Any, Awaitable, Callable

# Protocol channel = the original stdout; everything else prints to stderr.
_PROTO = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
os.dup2(2, 1)
sys.stdout = sys.stderr

import agentscope  # noqa: E402
from agentscope._logging import logger as _as_logger  # noqa: E402
from agentscope.workspace import LocalWorkspace  # noqa: E402
from agentscope.mcp import MCPClient  # noqa: E402
from agentscope.message import (  # noqa: E402
    DataBlock,
    Msg,
    ToolResultBlock,
)
from agentscope.app.workspace_manager import (  # noqa: E402
    IsolationPolicy,
    LocalWorkspaceManager,
)

# Our side runs with a silent logger; give the reference the same chance.
_as_logger.setLevel(logging.ERROR)


def _load(fixtures: str, name: str) -> Any:
    with open(os.path.join(fixtures, name), encoding="utf-8") as f:
        return json.load(f)


def _tmp(prefix: str) -> str:
    return tempfile.mkdtemp(prefix=f"peer-ref-{prefix}-")


def _tool_result(d: dict) -> ToolResultBlock:
    return ToolResultBlock.model_validate(d)


def _data_block(d: dict) -> DataBlock:
    return DataBlock.model_validate(d)


def _msg(d: dict) -> Msg:
    return Msg.model_validate(d)


# ── bench operations ───────────────────────────────────────────────

# CPU time of the last timed region (all threads of this process, not child
# processes): steadier than wall time on a busy machine.
_LAST_CPU_MS = 0.0


def _start() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _stop(t0: tuple[float, float]) -> float:
    global _LAST_CPU_MS
    _LAST_CPU_MS = (time.process_time() - t0[1]) * 1000
    return (time.perf_counter() - t0[0]) * 1000


# Each returns (elapsed_ms, count, extra) after doing its own set-up and
# clean-up outside the timed region.

Timed = tuple[float, int, dict]


async def _new_ws(workdir: str, **kw: Any) -> LocalWorkspace:
    ws = LocalWorkspace(workdir=workdir, workspace_id="peer-bench", **kw)
    await ws.initialize()
    return ws


async def bench_init_seed(fx: str) -> Timed:
    seeds = _load(fx, "index.json")["seedSkills"]
    root = _tmp("init")
    try:
        t0 = _start()
        ws = LocalWorkspace(
            workdir=os.path.join(root, "ws"),
            workspace_id="peer-bench",
            skill_paths=seeds,
        )
        await ws.initialize()
        ms = _stop(t0)
        await ws.close()
        return ms, len(seeds), {}
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def bench_add_skills(fx: str) -> Timed:
    adds = _load(fx, "index.json")["addSkills"]
    root = _tmp("add")
    try:
        ws = await _new_ws(os.path.join(root, "ws"))
        t0 = _start()
        for path in adds:
            await ws.add_skill(path, agent_id="agent-0")
        ms = _stop(t0)
        listed = await ws.list_skills(agent_id="agent-0")
        await ws.close()
        return ms, len(adds), {"skills": len(listed)}
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _list_agents(fx: str, warm: bool) -> Timed:
    seeds = _load(fx, "index.json")["seedSkills"]
    root = _tmp("list")
    try:
        ws = await _new_ws(os.path.join(root, "ws"), skill_paths=seeds)
        agents = [f"agent-{i}" for i in range(10)]
        if warm:
            for a in agents:
                await ws.list_skills(agent_id=a)
        total = 0
        t0 = _start()
        for a in agents:
            total += len(await ws.list_skills(agent_id=a))
        ms = _stop(t0)
        await ws.close()
        return ms, len(agents), {"skills": total}
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def bench_list_skills_first(fx: str) -> Timed:
    return await _list_agents(fx, warm=False)


async def bench_list_skills_warm(fx: str) -> Timed:
    return await _list_agents(fx, warm=True)


async def _offload_results(fx: str, kind: str) -> Timed:
    p = _load(fx, "payloads.json")
    if kind == "small":
        results = [
            _tool_result(
                {
                    "id": f"call-{i:04d}",
                    "name": "bench_tool",
                    "output": text,
                    "state": "success",
                },
            )
            for i, text in enumerate(p["smallResults"])
        ]
    else:
        with open(os.path.join(fx, p["bigResultFile"]), encoding="utf-8") as f:
            big = f.read()
        results = [
            _tool_result(
                {
                    "id": f"big-{i:02d}",
                    "name": "bench_tool",
                    "output": big,
                    "state": "success",
                },
            )
            for i in range(p["bigResultCount"])
        ]
    root = _tmp("offload")
    try:
        ws = await _new_ws(os.path.join(root, "ws"))
        t0 = _start()
        for r in results:
            await ws.offload_tool_result("session-1", r)
        ms = _stop(t0)
        await ws.close()
        return ms, len(results), {}
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def bench_offload_tool_result_small(fx: str) -> Timed:
    return await _offload_results(fx, "small")


async def bench_offload_tool_result_1mib(fx: str) -> Timed:
    return await _offload_results(fx, "big")


async def bench_offload_data(fx: str) -> Timed:
    p = _load(fx, "payloads.json")
    blocks = [_data_block(b) for b in p["dataBlocks"]]
    root = _tmp("data")
    try:
        ws = await _new_ws(os.path.join(root, "ws"))
        t0 = _start()
        for b in blocks:
            await ws.offload_data_block(b)
        ms = _stop(t0)
        files = len(os.listdir(os.path.join(root, "ws", "data")))
        await ws.close()
        return ms, len(blocks), {"files": files}
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def bench_offload_context(fx: str) -> Timed:
    p = _load(fx, "payloads.json")
    msgs = [_msg(m) for m in p["contextMessages"]]
    root = _tmp("ctx")
    try:
        ws = await _new_ws(os.path.join(root, "ws"))
        t0 = _start()
        path = await ws.offload_context("session-1", msgs)
        ms = _stop(t0)
        size = os.path.getsize(path)
        await ws.close()
        return ms, len(msgs), {"bytes": size}
    finally:
        shutil.rmtree(root, ignore_errors=True)


HITS = 100_000


async def bench_manager_hits(fx: str) -> Timed:
    root = _tmp("mgr")
    try:
        mgr = LocalWorkspaceManager(root)
        ws = await mgr.get_workspace("user-1", "agent-1", "s1", "ws-hot")
        get = mgr.get_workspace
        t0 = _start()
        for _ in range(HITS):
            got = await get("user-1", "agent-1", "s1", "ws-hot")
        ms = _stop(t0)
        assert got is ws
        await mgr.close_all()
        return ms, HITS, {}
    finally:
        shutil.rmtree(root, ignore_errors=True)


ASSIGNS = 100_000


async def _assign(policy: IsolationPolicy) -> Timed:
    root = _tmp("assign")
    try:
        mgr = LocalWorkspaceManager(root, isolation=policy)
        users = [f"user-{i}" for i in range(1000)]
        agents = [f"agent-{i}" for i in range(7)]
        assign = mgr.assign_workspace_id
        last = ""
        t0 = _start()
        for i in range(ASSIGNS):
            last = await assign(
                user_id=users[i % 1000],
                agent_id=agents[i % 7],
                session_id="s",
            )
        ms = _stop(t0)
        return ms, ASSIGNS, {"last": last if policy != "per_session" else ""}
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def bench_assign_per_agent(fx: str) -> Timed:
    return await _assign(IsolationPolicy.PER_AGENT)


async def bench_assign_per_user(fx: str) -> Timed:
    return await _assign(IsolationPolicy.PER_USER)


async def bench_assign_per_session(fx: str) -> Timed:
    return await _assign(IsolationPolicy.PER_SESSION)


async def bench_manager_first_concurrent(fx: str) -> Timed:
    root = _tmp("first")
    try:
        mgr = LocalWorkspaceManager(root)
        n = 100
        t0 = _start()
        got = await asyncio.gather(
            *(
                mgr.get_workspace(
                    "user-1",
                    f"agent-{i:03d}",
                    "s1",
                    f"ws-{i:03d}",
                )
                for i in range(n)
            ),
        )
        ms = _stop(t0)
        assert len({id(w) for w in got}) == n
        await mgr.close_all()
        return ms, n, {}
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def bench_bwrap_exec_true(fx: str) -> Timed:
    # The reference BubblewrapWorkspace.initialize() bootstraps its gateway
    # by downloading uv and ripgrep from the internet, which this machine
    # cannot reach; its exec path is the backend, so time that directly.
    from agentscope.workspace import BubblewrapBackend

    root = _tmp("bwrap")
    try:
        backend = BubblewrapBackend(
            host_workdir=os.path.join(root, "ws"),
            host_tmpdir=os.path.join(root, "tmp"),
        )
        first = await backend.exec_shell(["true"])
        if not first.ok():
            raise RuntimeError(
                "bwrap true failed: " + first.stderr.decode("utf-8", "replace"),
            )
        n = 200
        t0 = _start()
        for _ in range(n):
            r = await backend.exec_shell(["true"])
            if r.exit_code != 0:
                raise RuntimeError("bwrap true failed")
        ms = _stop(t0)
        return ms, n, {}
    finally:
        shutil.rmtree(root, ignore_errors=True)


BENCHES: dict[str, Callable[[str], Awaitable[Timed]]] = {
    "init_seed20": bench_init_seed,
    "add_skills_100": bench_add_skills,
    "list_skills_10_first": bench_list_skills_first,
    "list_skills_10_warm": bench_list_skills_warm,
    "offload_tool_result_small": bench_offload_tool_result_small,
    "offload_tool_result_1mib": bench_offload_tool_result_1mib,
    "offload_data_50pct": bench_offload_data,
    "offload_context_1000": bench_offload_context,
    "manager_hits_100k": bench_manager_hits,
    "assign_per_agent_100k": bench_assign_per_agent,
    "assign_per_user_100k": bench_assign_per_user,
    "assign_per_session_100k": bench_assign_per_session,
    "manager_first_100_concurrent": bench_manager_first_concurrent,
    "bwrap_exec_true_200": bench_bwrap_exec_true,
}


# ── parity scenario ────────────────────────────────────────────────


def _skill_json(s: Any, workdir: str) -> dict:
    return {
        "name": s.name,
        "description": s.description,
        "dir": os.path.relpath(s.dir, workdir).replace(os.sep, "/"),
        "markdown": s.markdown,
    }


def _rel(path: str, workdir: str) -> str:
    return os.path.relpath(path, workdir).replace(os.sep, "/")


class Scenario:
    """Interprets the shared step list (bench/peer/scenario.ts)."""

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.ws: LocalWorkspace | None = None

    async def step(self, s: dict) -> Any:
        call = s["call"]
        scope = {
            k: s[v]
            for k, v in (("agent_id", "agentId"), ("session_id", "sessionId"))
            if v in s
        }
        if call == "snapshot":
            shutil.copytree(
                self.workdir,
                f"{self.workdir}@{s['label']}",
                symlinks=True,
            )
            return None
        if call == "writeFile":
            target = os.path.join(self.workdir, s["path"])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as f:
                f.write(s["content"])
            return None
        if call == "init":
            self.ws = LocalWorkspace(
                workdir=self.workdir,
                workspace_id=s.get("workspaceId"),
                skill_paths=s.get("skillPaths") or None,
                default_mcps=[
                    MCPClient.model_validate(m) for m in s.get("defaultMcps", [])
                ]
                or None,
            )
            await self.ws.initialize()
            return None
        ws = self.ws
        assert ws is not None, "scenario must start with init"
        if call == "close":
            await ws.close()
            return None
        if call == "listSkills":
            skills = await ws.list_skills(**scope)
            return [_skill_json(x, self.workdir) for x in skills]
        if call == "addSkill":
            await ws.add_skill(s["path"], **scope)
            return None
        if call == "addSkillArchive":
            with open(s["file"], "rb") as f:
                data = f.read()

            async def stream():
                yield data

            await ws.add_skill_archive(stream(), s["format"], s["dirName"], **scope)
            return None
        if call == "reset":
            await ws.reset()
            return None
        if call == "removeSkill":
            await ws.remove_skill(s["name"], **scope)
            return None
        if call == "addMcp":
            await ws.add_mcp(MCPClient.model_validate(s["spec"]), **scope)
            return None
        if call == "removeMcp":
            await ws.remove_mcp(s["name"], **scope)
            return None
        if call == "listMcps":
            return [m.name for m in await ws.list_mcps(**scope)]
        if call == "purgeSession":
            await ws.purge_session(
                agent_id=s.get("agentId", ""),
                session_id=s["sessionId"],
            )
            return None
        if call == "purgeAgent":
            await ws.purge_agent(agent_id=s["agentId"])
            return None
        if call == "offloadToolResult":
            path = await ws.offload_tool_result(
                s["sessionId"],
                _tool_result(s["result"]),
            )
            return _rel(path, self.workdir)
        if call == "offloadData":
            block = await ws.offload_data_block(_data_block(s["block"]))
            out = block.model_dump(mode="json")
            return {
                "id": out["id"],
                "name": out["name"],
                "source": out["source"],
            }
        if call == "offloadContext":
            path = await ws.offload_context(
                s["sessionId"],
                [_msg(m) for m in s["messages"]],
            )
            return _rel(path, self.workdir)
        raise ValueError(f"unknown scenario call {call!r}")


async def run_scenario(req: dict) -> dict:
    sc = Scenario(req["workdir"])
    results = []
    for s in req["steps"]:
        try:
            results.append({"ok": True, "value": await sc.step(s)})
        except Exception as e:  # an error is a result to compare, too
            results.append(
                {"ok": False, "error": f"{type(e).__name__}: {e}"},
            )
    return {"results": results}


# ── main loop ──────────────────────────────────────────────────────


async def handle(req: dict) -> dict:
    op = req.get("op")
    if op == "version":
        import platform

        return {
            "version": agentscope.__version__,
            "python": platform.python_version(),
        }
    if op == "bench":
        fn = BENCHES.get(req["name"])
        if fn is None:
            raise ValueError(f"unknown bench {req['name']!r}")
        gc.collect()
        ms, count, extra = await fn(req["fixtures"])
        return {"ms": ms, "cpuMs": _LAST_CPU_MS, "count": count, "extra": extra}
    if op == "scenario":
        return await run_scenario(req)
    raise ValueError(f"unknown op {op!r}")


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = sys.stdin
    while True:
        line = await loop.run_in_executor(None, reader.readline)
        if not line:
            return
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        try:
            reply = {"id": req.get("id"), "ok": True, **(await handle(req))}
        except Exception as e:
            reply = {
                "id": req.get("id"),
                "ok": False,
                "error": f"{type(e).__name__}: {e}",
                "trace": traceback.format_exc(),
            }
        _PROTO.write(json.dumps(reply, ensure_ascii=False) + "\n")
        _PROTO.flush()


if __name__ == "__main__":
    asyncio.run(main())
