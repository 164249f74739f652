# Copyright Spack Project Developers. See COPYRIGHT file for details.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

# Spack recipe for SKaMPI 6; builtin Spack has none, so the kit carries it.

from spack_repo.builtin.build_systems.autotools import AutotoolsPackage

from spack.package import *


class Skampi(AutotoolsPackage):
    """SKaMPI 6, the Special Karlsruher MPI benchmark, extended for OpenSHMEM.

    pt2pt-kit uses its point-to-point measurements (ski/skampi_pt2pt.ski) as a
    second opinion next to the kit's own probe and the OSU Micro-Benchmarks.
    """

    homepage = "https://github.com/coti/SKaMPI"
    git = "https://github.com/coti/SKaMPI.git"

    maintainers("pt2pt-kit")

    license("GPL-2.0-only")

    # The repository has no tags; configure.ac says AC_INIT([skampi], [6.0]).
    # Pin the last commit (2022-10-25) so a site mirror is reproducible.
    version("6.0", commit="116c409afe0902d6ea2ad9dc3eb6ba18de6f77ed")
    version("master", branch="master")

    variant("papi", default=False, description="Read hardware counters through PAPI")

    depends_on("c", type="build")
    depends_on("mpi")
    depends_on("papi", when="+papi")

    # src/ holds a bison grammar and a flex scanner that are generated at build time.
    depends_on("bison", type="build")
    depends_on("flex", type="build")

    # A git checkout gives every file the same mtime, so automake's "missing"
    # would regenerate the shipped configure/Makefile.in half-way through the
    # build anyway; regenerate them up front with Spack's autotools (Spack's
    # autoreconf phase insists on autoconf, automake and libtool being present).
    force_autoreconf = True
    depends_on("autoconf", type="build")
    depends_on("automake", type="build")
    depends_on("libtool", type="build")
    depends_on("m4", type="build")

    def configure_args(self):
        args = ["--enable-mpi", f"MPICC={self.spec['mpi'].mpicc}"]
        if self.spec.satisfies("+papi"):
            args += ["--enable-papi", f"--with-papi={self.spec['papi'].prefix}"]
        return args

    @run_after("install")
    def install_ski_files(self):
        """Ship the measurement scripts; the kit's job templates point at share/skampi/ski."""
        install_tree("ski", join_path(self.prefix.share, "skampi", "ski"))
