# seqpoint_dependency(NAME DOC): declares SEQPOINT_WITH_<NAME> as ON/OFF/AUTO (default AUTO).
# SeqpointFindDeps.cmake resolves it into SEQPOINT_HAVE_<NAME> (0/1); ON and missing is a
# configure error so that what a package contains never silently depends on the build host.
function(seqpoint_dependency name doc)
  set(SEQPOINT_WITH_${name} AUTO CACHE STRING "${doc}: ON, OFF or AUTO")
  set_property(CACHE SEQPOINT_WITH_${name} PROPERTY STRINGS ON OFF AUTO)
endfunction()

option(SEQPOINT_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)

# seqpoint_resolve(NAME FOUND REASON): sets SEQPOINT_HAVE_<NAME> in the caller's scope.
macro(seqpoint_resolve name found reason)
  string(TOUPPER "${SEQPOINT_WITH_${name}}" _mode)
  if(_mode STREQUAL "OFF")
    set(SEQPOINT_HAVE_${name} 0)
  elseif(${found})
    set(SEQPOINT_HAVE_${name} 1)
  elseif(_mode STREQUAL "ON")
    message(FATAL_ERROR "SEQPOINT_WITH_${name}=ON but ${reason}. Run scripts/setup.sh, "
                        "or configure with -DSEQPOINT_WITH_${name}=OFF.")
  else()
    set(SEQPOINT_HAVE_${name} 0)
  endif()
  message(STATUS "seqpoint: ${name} = ${SEQPOINT_HAVE_${name}} (requested ${_mode})")
endmacro()
