# SMART-BT tests: unit tests (GoogleTest, memory blades inside the process)
# and multi-process integration tests (test/integration/btree_*.sh).
add_executable(btree_unit_tests
  unit/btree_failure_test.cc
  unit/btree_page_test.cc
  unit/btree_stall_test.cc
  unit/btree_tree_test.cc)
target_link_libraries(btree_unit_tests PRIVATE smart_btree GTest::gtest GTest::gtest_main)
target_include_directories(btree_unit_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit)
gtest_discover_tests(btree_unit_tests PROPERTIES LABELS unit TIMEOUT 120)

# btree_integration_test(NAME SCRIPT ARGS...)
function(btree_integration_test name script)
  add_test(NAME integration.btree_${name}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/${script} ${ARGN})
  set_tests_properties(integration.btree_${name} PROPERTIES
    LABELS integration
    TIMEOUT 180
    ENVIRONMENT "SMART_BIN=${CMAKE_BINARY_DIR}/bin;SMART_SOURCE=${PROJECT_SOURCE_DIR}")
endfunction()
foreach(name writers structure bench)
  btree_integration_test(${name} btree_${name}.sh)
endforeach()
# The faults as two tests, kills and stops, so that each stays within its
# time limit over verbs in the guest.
btree_integration_test(faults btree_faults.sh kill)
btree_integration_test(faults_stops btree_faults.sh stop)

# Linearizability under contention, with a client killed and one stopped
# and fenced, checked by Porcupine (test/linearizability; GO_EXECUTABLE
# and SMART_GO_ENV come from hashtable.cmake). Skipped (77) without Go.
btree_integration_test(linearizability btree_linearizability.sh)
set_tests_properties(integration.btree_linearizability PROPERTIES
  TIMEOUT 300
  SKIP_RETURN_CODE 77
  ENVIRONMENT "SMART_BIN=${CMAKE_BINARY_DIR}/bin;SMART_SOURCE=${PROJECT_SOURCE_DIR};${SMART_GO_ENV}")
