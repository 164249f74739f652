# Copyright Spack Project Developers. See COPYRIGHT file for details.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

# Spack recipe for the pt2pt-kit raw-timing probe (kit/probe in the kit's tree).

import os

from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import *


class Pt2ptProbe(MakefilePackage):
    """The pt2pt-kit probe: times MPI point-to-point operations one message at a time.

    It is built by the probe's own Makefile, so a Spack build and a plain
    `make -C kit/probe` produce the same binary.  The kit's spack.yaml builds it
    from the work tree through `develop:` (kit/probe); a plain `spack install
    pt2pt-probe@main` clones the kit's repository, whose probe is under kit/probe.
    """

    homepage = "https://github.com/pt2pt-kit/pt2pt-kit"
    git = "https://github.com/pt2pt-kit/pt2pt-kit.git"

    maintainers("pt2pt-kit")

    license("MIT")

    version("main", branch="main")

    depends_on("c", type="build")
    depends_on("mpi")

    @property
    def build_directory(self):
        # Build out of tree, in Spack's stage: the work tree may hold objects from a
        # plain `make` against another MPI, and Spack should not write into it.
        return join_path(self.stage.path, "probe-build")

    @property
    def build_targets(self):
        # The Makefile honours MPICC; point it at the MPI that Spack chose.
        return [f"MPICC={self.spec['mpi'].mpicc}"]

    @property
    def probe_source(self):
        # develop: points at kit/probe itself; a git clone has it under kit/probe.
        nested = join_path(self.stage.source_path, "kit", "probe")
        return nested if os.path.isdir(nested) else self.stage.source_path

    def edit(self, spec, prefix):
        mkdirp(self.build_directory)
        for name in os.listdir(self.probe_source):
            if name == "Makefile" or name.endswith((".c", ".h")):
                copy(join_path(self.probe_source, name), self.build_directory)

    def install(self, spec, prefix):
        # The probe's Makefile has no install target: copy the binary.
        mkdirp(prefix.bin)
        install(join_path(self.build_directory, "pt2pt-probe"), prefix.bin)
