# SMART-DTX tests: unit tests (GoogleTest, memory blades inside the process).
add_executable(dtx_unit_tests
  unit/dtx_commit_failure_test.cc
  unit/dtx_driver_test.cc
  unit/dtx_history_test.cc
  unit/dtx_insert_test.cc
  unit/dtx_layout_test.cc
  unit/dtx_recovery_race_test.cc
  unit/dtx_recovery_test.cc
  unit/dtx_tatp_test.cc
  unit/dtx_transaction_test.cc)
target_link_libraries(dtx_unit_tests PRIVATE smart_dtx smart_dtx_tatp GTest::gtest GTest::gtest_main)
target_include_directories(dtx_unit_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit)
gtest_discover_tests(dtx_unit_tests PROPERTIES LABELS unit TIMEOUT 120)

foreach(name smallbank tatp)
  add_test(NAME integration.dtx_${name} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/dtx_${name}.sh)
  set_tests_properties(integration.dtx_${name} PROPERTIES
    LABELS integration
    TIMEOUT 180
    ENVIRONMENT "SMART_BIN=${CMAKE_BINARY_DIR}/bin;SMART_SOURCE=${PROJECT_SOURCE_DIR}")
endforeach()
