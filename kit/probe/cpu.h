/* Where this rank runs: CPU number and its socket/core, for the meta's `cpus` key. */
#ifndef PT2PT_CPU_H
#define PT2PT_CPU_H

struct cpu_place {
    int cpu;     /* sched_getcpu(), -1 where unavailable */
    int socket;  /* physical_package_id of that CPU, -1 if unknown */
    int core;    /* core_id of that CPU, -1 if unknown */
};

struct cpu_place cpu_place_now(void);

#endif
