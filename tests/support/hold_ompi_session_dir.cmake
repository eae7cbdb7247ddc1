# Read by ctest before it runs any test (TEST_INCLUDE_FILES). Open MPI 4
# keeps every job's session files under one folder per host and user,
# <tmp>/ompi.<host>.<uid>, and the last job to end removes that folder when
# it is empty. Tests run in parallel: a job ending between another job's
# creating the folder and creating its own folder inside it fails that other
# job's start ("A call to mkdir was unable to create the desired directory").
# A folder of our own inside it keeps it from ever being empty.
if(DEFINED ENV{OMPI_MCA_orte_tmpdir_base})
  set(ompi_tmp "$ENV{OMPI_MCA_orte_tmpdir_base}")
elseif(DEFINED ENV{TMPDIR})
  set(ompi_tmp "$ENV{TMPDIR}")
else()
  set(ompi_tmp /tmp)
endif()
cmake_host_system_information(RESULT ompi_host QUERY HOSTNAME)
string(REGEX REPLACE "\\..*" "" ompi_host "${ompi_host}")  # Open MPI drops the domain
execute_process(COMMAND id -u OUTPUT_VARIABLE ompi_uid OUTPUT_STRIP_TRAILING_WHITESPACE)
file(MAKE_DIRECTORY "${ompi_tmp}/ompi.${ompi_host}.${ompi_uid}/held-open-by-rankscope-tests")
