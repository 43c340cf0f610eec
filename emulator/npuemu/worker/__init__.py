"""The simulation worker: one simulator process per device, fed by the server over IPC."""
