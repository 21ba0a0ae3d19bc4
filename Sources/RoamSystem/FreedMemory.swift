import CRoamLinux

/// Memory the process freed and its allocator kept.
///
/// glibc's `malloc` keeps what a thread frees in that thread's arena for its next allocations,
/// and gives pages back to the kernel only from the top of an arena: a long run whose
/// threads now and then hold more for a moment (a connection's buffers, an array that doubled,
/// a burst of packets) keeps every such high-water mark resident, and its resident memory creeps
/// up for its first half hour though what it holds barely does. ``release()`` hands every free
/// page of every arena back (`malloc_trim(0)`): the pages are mapped again only when used.
package enum FreedMemory {
    /// Gives the free pages of every arena back to the kernel. Takes each arena's lock in turn
    /// and walks its free lists: for a periodic call, not per operation. Returns whether any
    /// memory was given back.
    @discardableResult
    package static func release() -> Bool { roam_malloc_trim() == 1 }

    /// Has every thread allocate from one arena (`mallopt(M_ARENA_MAX, 1)`), for a process
    /// whose threads allocate little and often and hold it long (`roam run`): glibc otherwise
    /// gives threads arenas of their own (up to eight per core), where pages part used by what a
    /// thread still holds and part free stay resident, and ``release()`` cannot give them back.
    /// Small allocations still come from each thread's cache without the arena's lock. Process
    /// wide: for a program's `main`, before it starts threads, never from a library. Returns
    /// whether glibc took it.
    @discardableResult
    package static func useOneArena() -> Bool { roam_malloc_one_arena() == 1 }
}
