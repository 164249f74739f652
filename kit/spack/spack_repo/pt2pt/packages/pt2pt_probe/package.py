# Spack recipe for the pt2pt-kit raw-timing probe (kit/probe in the kit's tree).

from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import *


class Pt2ptProbe(MakefilePackage):
    """The pt2pt-kit probe: times MPI point-to-point operations one message at a time.

    It is built by the probe's own Makefile, so a Spack build and a plain
    `make -C kit/probe` produce the same binary.  The kit's spack.yaml builds it
    from the work tree through `develop:`; the `main` version has no download of
    its own for that reason.
    """

    homepage = "https://github.com/pt2pt-kit/pt2pt-kit"

    license("MIT")

    version("main")

    depends_on("c", type="build")
    depends_on("mpi")

    def build(self, spec, prefix):
        # The Makefile honours MPICC; point it at the MPI that Spack chose.
        make(f"MPICC={spec['mpi'].mpicc}")

    def install(self, spec, prefix):
        # The probe's Makefile need not have an install target: copy the binary.
        mkdirp(prefix.bin)
        install("pt2pt-probe", prefix.bin)
