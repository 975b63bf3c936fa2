// Checks of a database's state after a run: replicas byte for byte equal,
// no lock left on any record, and a walk over every live record.
#pragma once

#include <functional>
#include <string>

#include "database.h"
#include "record.h"

namespace smart::dtx {

/// "" when every table's backups equal its primary byte for byte, else the
/// first difference (table, node, slot, which replica).
std::string CompareReplicas(Database& db);
/// "" when no slot of any replica carries a lock word, else the first one
/// (table, node, slot, the word and whose it is).
std::string FindLeftLocks(Database& db);
/// Calls `fn` for every live record of `table` on its primary; returns "" or
/// what could not be read (a slot that does not decode).
std::string ForEachRecord(Database& db, uint16_t table, const std::function<void(const Record&)>& fn);

}  // namespace smart::dtx
