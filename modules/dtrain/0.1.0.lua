-- Lmod modulefile for dtrain 0.1.0.
--   module use /path/to/dtrain/modules && module load dtrain
-- DTRAIN_HOME is the checkout (or install prefix) this file belongs to; binaries are looked up in
-- $DTRAIN_HOME/bin (an install) and $DTRAIN_HOME/build, $DTRAIN_HOME/build/tools (a build tree).
-- Site prerequisites: set DTRAIN_PREREQ_MODULES to a space-separated list of the site's module names
-- (for example "openmpi/4.1 hdf5/1.10-openmpi cuda/13.0 nccl") before loading; each is loaded first.
whatis("Name: dtrain")
whatis("Version: 0.1.0")
whatis("Description: MPI-native trainer for transformer language models on Slurm/HPC clusters")

help([[
dtrain 0.1.0: one native binary that trains GPT-style models on any tensor x pipeline x data
parallel layout, launched with srun or mpirun (no MASTER_ADDR, no ssh).

  dtrain --help                       every input.ini key
  srun --mpi=pmix dtrain input.ini    train (see slurm/ for sbatch scripts)
  ckpt-consolidate CKPT --info        inspect, verify, merge or reshard checkpoints

Prerequisite modules of your site: export DTRAIN_PREREQ_MODULES="openmpi hdf5 ..." before loading.
]])

local home = os.getenv("DTRAIN_HOME_OVERRIDE") or pathJoin(myFileName():match("(.*)/modules/dtrain/[^/]+$") or "")
local prereqs = os.getenv("DTRAIN_PREREQ_MODULES") or ""
for name in prereqs:gmatch("%S+") do
  depends_on(name)
end

setenv("DTRAIN_HOME", home)
prepend_path("PATH", pathJoin(home, "build/tools"))
prepend_path("PATH", pathJoin(home, "build"))
prepend_path("PATH", pathJoin(home, "bin"))
