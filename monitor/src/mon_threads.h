/* mon_threads.h - whether this process has a thread of its own running
 * outside the library (mon_threads.c). */
#ifndef MON_THREADS_H
#define MON_THREADS_H

#include <stdbool.h>

/* True when a thread of this process other than the calling one, the
 * library's own (named "dist-...") and those in skip[0..n) (threads
 * blocked in a synchronous call) is running or runnable (/proc state R):
 * a program thread computing, which may yet call what its peers wait
 * for; or asleep (nanosleep) when it is one of users[0..nu), the threads
 * that called the library before. False when /proc cannot be read. Reads
 * /proc/self/task; called by the record writer only while a synchronous
 * call is in flight. */
bool dist__mon_other_thread_running(const int *skip, int n, const int *users, int nu);

#endif
