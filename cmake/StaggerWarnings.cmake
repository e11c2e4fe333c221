# Warning flags for stagger's own targets, applied per target and PRIVATE
# (libuv's rule), never with add_compile_options: a project that embeds
# stagger with add_subdirectory gets neither our warnings on its own
# targets nor -Werror on ours unless it asks (STG_WERROR defaults to ON only
# when stagger is the top-level project, i.e. in our own builds and CI).
#
# stg_apply_warnings(DIR) walks DIR and its subdirectories once every target
# is declared, so the parts' CMakeLists need not remember to call anything.
# Imported and interface targets carry no compile step and are skipped.

set(STG_WARNING_FLAGS -Wall -Wextra -Wshadow
    $<$<COMPILE_LANGUAGE:C>:-Wstrict-prototypes>
    $<$<COMPILE_LANGUAGE:C>:-Wmissing-prototypes>)

function(stg__targets_in dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    stg__targets_in(${sub} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(stg_apply_warnings dir)
  stg__targets_in(${dir} targets)
  foreach(t ${targets})
    get_target_property(type ${t} TYPE)
    if(type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      target_compile_options(${t} PRIVATE ${STG_WARNING_FLAGS}
                             $<$<BOOL:${STG_WERROR}>:-Werror>)
    endif()
  endforeach()
endfunction()
