# SMART-HT tests: unit tests (GoogleTest, memory blades inside the process)
# and multi-process integration tests (test/integration/hashtable_*.sh).
add_executable(hashtable_unit_tests
  unit/hashtable_check_values_test.cc
  unit/hashtable_directory_test.cc
  unit/hashtable_duplicates_test.cc
  unit/hashtable_failure_test.cc
  unit/hashtable_layout_test.cc
  unit/hashtable_load_test.cc
  unit/hashtable_race_test.cc
  unit/hashtable_stopped_test.cc
  unit/hashtable_table_test.cc
  unit/hashtable_torn_view_test.cc
  unit/writer_log_check_test.cc)
target_link_libraries(hashtable_unit_tests PRIVATE smart_hashtable smart_check GTest::gtest GTest::gtest_main)
target_include_directories(hashtable_unit_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit)
gtest_discover_tests(hashtable_unit_tests PROPERTIES LABELS unit TIMEOUT 120)

# hashtable_integration_test(NAME SCRIPT ARGS...)
function(hashtable_integration_test name script)
  add_test(NAME integration.hashtable_${name}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/${script} ${ARGN})
  set_tests_properties(integration.hashtable_${name} PROPERTIES
    LABELS integration
    TIMEOUT 180
    ENVIRONMENT "SMART_BIN=${CMAKE_BINARY_DIR}/bin;SMART_SOURCE=${PROJECT_SOURCE_DIR}")
endfunction()
foreach(name insert load update delete torn growth grow_far multishard bench crash bench_args start_group stops)
  hashtable_integration_test(${name} hashtable_${name}.sh)
endforeach()
# The split faults as two tests, kills and stops, so that each stays within
# its time limit over verbs in the guest.
hashtable_integration_test(split_faults hashtable_split_faults.sh kill)
hashtable_integration_test(split_stops hashtable_split_faults.sh stop)

# Linearizability, checked by Porcupine (test/linearizability, a Go
# program): the checker's own tests and the table's history under
# contention. Skipped (77) without a Go toolchain.
find_program(GO_EXECUTABLE go HINTS /usr/local/go/bin /usr/lib/go/bin)
if(NOT GO_EXECUTABLE)
  message(STATUS "Go not found: the linearizability tests will be skipped (install golang-go)")
  set(GO_EXECUTABLE "")
endif()
set(SMART_GO_ENV "GO=${GO_EXECUTABLE};SMART_GO_DIR=${CMAKE_BINARY_DIR}/go")
add_test(NAME integration.linearizability_checker
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/linearizability/go_test.sh)
hashtable_integration_test(linearizability hashtable_linearizability.sh kill)
foreach(mode splits duplicates stops)
  hashtable_integration_test(linearizability_${mode} hashtable_linearizability.sh ${mode})
endforeach()
set_tests_properties(integration.linearizability_checker integration.hashtable_linearizability
  integration.hashtable_linearizability_splits integration.hashtable_linearizability_duplicates
  integration.hashtable_linearizability_stops PROPERTIES
  LABELS integration
  TIMEOUT 300
  SKIP_RETURN_CODE 77
  ENVIRONMENT "SMART_BIN=${CMAKE_BINARY_DIR}/bin;SMART_SOURCE=${PROJECT_SOURCE_DIR};${SMART_GO_ENV}")
