"""Opening the workbench is an engine start: unfinished operations are recovered."""

from __future__ import annotations

import socket

from rmtui.engine.writes.operations import OperationStore
from rmtui.engine.writes.supervisor import Supervisor
from rmtui.tui.app import RmtuiApp
from tests.test_tui_support import wait_for


async def test_app_start_recovers_an_operation_whose_owner_died(root):
    with Supervisor(root) as sup:
        op = sup.begin("update", "update", lease={"host": socket.gethostname(), "pid": 2**22 + 7, "start": "0"})

    def phase() -> str:
        store = OperationStore(root)
        try:
            return store.get(op.id).phase
        finally:
            store.close()

    assert phase() == "running"
    app = RmtuiApp(root)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: phase() == "abandoned", what="the dead writer's operation to be abandoned")
    assert not any(p.name == op.id for p in (root.runtime / "worktrees").glob("*"))
