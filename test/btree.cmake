# SMART-BT tests: unit tests (GoogleTest, memory blades inside the process)
# and multi-process integration tests (test/integration/btree_*.sh).
add_executable(btree_unit_tests
  unit/btree_page_test.cc
  unit/btree_tree_test.cc)
target_link_libraries(btree_unit_tests PRIVATE smart_btree GTest::gtest GTest::gtest_main)
target_include_directories(btree_unit_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit)
gtest_discover_tests(btree_unit_tests PROPERTIES LABELS unit TIMEOUT 120)
