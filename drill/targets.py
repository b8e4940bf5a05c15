"""What a drill's faults act on: the processes of a local cluster, named as in its `cluster.json` ("controller",
"broker-0", ...), through the launcher's own code (the same that `epoch-broker admin kill|pause|restart` uses).

Rules:
- Processes are signalled by the pids in `cluster.json`, never by name: only what the launcher started.
- `cluster.json` is read afresh for every action: a restart records a new pid there.
- `heal_all` brings every process back (SIGCONT where stopped, start where dead): a drill ends on a whole cluster.
"""

from __future__ import annotations

import signal
from pathlib import Path

from epoch_broker.drill import launcher


class LocalCluster:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @property
    def file(self) -> launcher.ClusterFile:
        return launcher.ClusterFile.read(self.directory)

    def spec(self, name: str) -> launcher.ProcessSpec:
        for spec in self.file.processes:
            if spec.name == name:
                return spec
        raise KeyError(f"no process {name!r} in {self.directory} (have {', '.join(self.names())})")

    def names(self) -> list[str]:
        return [spec.name for spec in self.file.processes]

    def broker_names(self) -> list[str]:
        return [spec.name for spec in self.file.brokers]

    def name_of(self, node_id: int) -> str:
        return self.file.process(node_id).name

    def running_broker_addresses(self) -> list[str]:
        return [spec.address for spec in self.file.brokers if launcher.process_state(spec) == "running"]

    def kill(self, name: str) -> None:
        spec = self.spec(name)
        launcher.signal_process(spec, signal.SIGKILL)
        if not launcher.wait_exit(spec, launcher.STOP_TIMEOUT_S):
            raise RuntimeError(f"{name} (pid {spec.pid}) still runs after SIGKILL")

    def pause(self, name: str) -> None:
        launcher.signal_process(self.spec(name), signal.SIGSTOP)

    def resume(self, name: str) -> None:
        launcher.signal_process(self.spec(name), signal.SIGCONT)

    def restart(self, name: str) -> None:
        """Start again (stopping it cleanly first if it runs), and wait for its ready line."""
        launcher.restart_process(self.directory, self.spec(name).node_id)

    def heal_all(self) -> list[str]:
        """SIGCONT every stopped process and start every dead one; what was done, for the log."""
        done = []
        for spec in self.file.processes:
            state = launcher.process_state(spec)
            if state == "paused":
                launcher.signal_process(spec, signal.SIGCONT)
                done.append(f"resumed {spec.name}")
            elif state != "running":
                launcher.restart_process(self.directory, spec.node_id)
                done.append(f"started {spec.name}")
        return done
