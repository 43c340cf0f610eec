"""A farm of simulated NPUs on labgrid (docs/farm.md); needs the ``farm`` extra.

- `npuemu.farm.resource`: the labgrid resource ``NpuEmuDevice`` (one emulated NPU) and the
  driver ``NpuEmuDriver`` that opens it through xrt;
- `npuemu.farm.exporter`: ``npu-emu-farm export``, labgrid's exporter for the devices of a
  running ``npu-emu serve``, with availability that follows the server and the leases;
- `npuemu.farm.reaper`: ``npu-emu-farm reaper``, gives back places whose device has been
  unleased for a grace period (labgrid's lock outlives a killed job, the lease does not);
- `npuemu.farm.fixtures`: reserve, acquire, open, give back: for CI jobs and pytest.

Nothing here imports the simulator: a client machine needs only xrt and labgrid.
"""
