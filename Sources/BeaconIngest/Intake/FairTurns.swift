/// The order in which the writer takes what arrived: one message of each agent in turn, each agent's in the order
/// they came. One credential's backlog (a flood, or a spool drained after an outage) then delays another agent's
/// batch by at most one of its own, not by all of them. Pure.
enum FairTurns {
    /// `items` reordered: the first of each key in order of first arrival, then the second of each, and so on.
    static func interleave<Item, Key: Hashable>(_ items: [Item], by key: (Item) -> Key) -> [Item] {
        var queues: [[Item]] = []
        var queueOf: [Key: Int] = [:]
        for item in items {
            let itemKey = key(item)
            if let index = queueOf[itemKey] {
                queues[index].append(item)
            } else {
                queueOf[itemKey] = queues.count
                queues.append([item])
            }
        }
        guard queues.count > 1 else { return items }
        var ordered: [Item] = []
        ordered.reserveCapacity(items.count)
        var round = 0
        while ordered.count < items.count {
            for queue in queues where round < queue.count { ordered.append(queue[round]) }
            round += 1
        }
        return ordered
    }
}
