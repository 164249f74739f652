/* sched_getcpu is a GNU extension: this file alone asks for it, and falls back to -1 where the
 * C library does not offer it. Socket and core come from Linux sysfs (cheap: two small reads). */
#define _GNU_SOURCE
#include "cpu.h"

#include <sched.h>
#include <stdio.h>

static int read_topology(int cpu, const char *item)
{
    char path[128];
    int value = -1;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", cpu, item);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    if (fscanf(f, "%d", &value) != 1)
        value = -1;
    fclose(f);
    return value;
}

struct cpu_place cpu_place_now(void)
{
    struct cpu_place p = {-1, -1, -1};
#if defined(__linux__) && (defined(__GLIBC__) || defined(CPU_SETSIZE))
    p.cpu = sched_getcpu();
#endif
    if (p.cpu >= 0) {
        p.socket = read_topology(p.cpu, "physical_package_id");
        p.core = read_topology(p.cpu, "core_id");
    }
    return p;
}
